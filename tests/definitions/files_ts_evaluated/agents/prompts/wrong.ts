import { defineAgent } from '@standardagents/spec';

export default defineAgent({ name: 'wrong' });
