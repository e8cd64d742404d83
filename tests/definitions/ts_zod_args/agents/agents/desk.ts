import { defineAgent } from '@standardagents/spec';

export default defineAgent({
  name: 'desk',
  sideA: { prompt: 'support' },
  sideB: { human: true },
});
