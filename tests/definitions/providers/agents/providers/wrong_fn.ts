export default defineModel({ name: 'wrong_fn', type: 'openai' });
