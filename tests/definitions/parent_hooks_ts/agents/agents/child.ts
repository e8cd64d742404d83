import { defineAgent } from '@standardagents/spec';
export default defineAgent({
  name: 'child',
  exposeAsTool: true,
  toolDescription: 'A child.',
  sideA: { prompt: 'chat' },
  sideB: { human: true },
  parentHooks: [{ hook: 'audit', stage: 'first' }],
});
