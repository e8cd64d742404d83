import { defineAgent } from '@standardagents/spec';
const agent = defineAgent({ name: 'x' });
