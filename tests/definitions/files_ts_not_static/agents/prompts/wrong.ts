export default defineAgent({ name: 'wrong' });
