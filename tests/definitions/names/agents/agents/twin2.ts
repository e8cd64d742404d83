import { defineAgent } from '@standardagents/spec';
export default defineAgent({ name: 'twin', sideA: { prompt: 'chat' }, sideB: { human: true } });
