import { defineAgent } from '@standardagents/spec';
export default defineAgent({ name: 'b', name: 'c', sideA: { prompt: 'chat' }, sideB: { human: true } });
