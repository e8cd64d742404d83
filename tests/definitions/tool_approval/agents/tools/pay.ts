import { defineTool } from '@standardagents/spec';
export default defineTool({
  description: 'Pays, from TypeScript.',
  args: { type: 'object', properties: { amount: { type: 'number' } } },
  result: 'paid',
  approval: { when: 'always', decisions: ['approve', 'reject'] },
});
