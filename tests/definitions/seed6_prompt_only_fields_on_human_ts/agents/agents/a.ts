import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: { prompt: 'chat' },
  sideB: {
    human: true,
    stopTool: 'done',
    sessionStatus: { name: 'status' },
  },
});
