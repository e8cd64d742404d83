import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: { prompt: 'chat', sessionStatus: 'done' },
  sideB: { human: true },
});
