import { defineTool } from '@standardagents/spec';
export default defineTool({
  description: 'Runs code.',
  execute: async (state, args) => ({ status: 'success', result: 'x' }),
});
