import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'gate',
  sideA: { prompt: 'chat' },
  sideB: { human: true, subagents: [{ agent: 'gate' }] },
});
