import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'a',
  sideA: {
    prompt: 'chat',
    sessionStop: { name: 'done' },
    sessionFail: { name: 'fail' },
    stopTool: 'halt',
  },
  sideB: { human: true },
});
