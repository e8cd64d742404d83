import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: { prompt: 'chat', endSessionTool: 'done', statusTool: 'done' },
  sideB: { human: true },
});
