import { defineTool } from '@standardagents/spec';
export default defineTool({
  description: 'Reminds you later, from TypeScript.',
  effect: 'remind',
  args: {
    type: 'object',
    properties: { content: { type: 'string' }, delayMs: { type: 'integer' } },
  },
});
