import { defineModel } from '@standardagents/spec';
export default defineModel({ name: 'wrong_fn', type: 'openai' });
