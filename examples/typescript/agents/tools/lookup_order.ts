import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Looks up an order by its id',
  args: z.object({
    orderId: z.string().describe('The order id, as printed on the receipt'),
    includeItems: z.boolean().default(false).describe('List the items too'),
  }),
  execute: async (state, args) => {
    return { status: 'success', result: `Order ${args.orderId} is packed.` };
  },
});
