import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

// Docs-shaped: the arguments are read and `execute` runs in the code host; a memory ceiling
// of 0 MiB is refused.
export default defineTool({
  description: 'Refunds an order.',
  args: z.object({
    orderId: z.string(),
    reason: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('damaged'), photos: z.number().int().min(1) }),
      z.object({ kind: z.literal('late'), days: z.number() }),
    ]),
  }),
  memoryMb: 0,
  execute: async (state, args) => ({ status: 'success', result: `refunded ${args.orderId}` }),
});
