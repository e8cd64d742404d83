import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  type: 'ai_human',
  sideA: { prompt: 'chat' },
});
