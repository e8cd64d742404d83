import { defineTool } from '@standardagents/spec';

// Declarative: duet never runs TypeScript, so the result is a template.
export default defineTool({
  description: 'Approve the asset. Ends the session with the summary as its result.',
  args: {
    type: 'object',
    properties: {
      summary: { type: 'string' },
      attachments: { type: 'array', items: { type: 'string' } },
    },
    required: ['summary'],
    additionalProperties: false,
  },
  result: 'Approved: {{summary}}',
});
