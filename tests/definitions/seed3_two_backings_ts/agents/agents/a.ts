import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: { prompt: 'chat', handler: 'h' },
  sideB: { human: true },
});
