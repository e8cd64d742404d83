import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Shouts.',
  result: 'ok',
  args: z.object({
    text: z.string().transform((s) => s.toUpperCase()),
  }),
});
