import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Looks up an order by its id',
  args: z.object({
    orderId: z.string().describe('The order id, as printed on the receipt'),
    includeItems: z.boolean().default(false).describe('List the items too'),
  }),
  // What the code may read from the environment: only what a definition declares.
  variables: [
    { name: 'ORDERS_URL', type: 'text', required: false, description: "The shop's API, e.g. https://orders.example.com" },
  ],
  execute: async (state, args) => {
    // ThreadState first: remember what was looked up, read the shop's address from env.
    await state.setValue('last_order', args.orderId);
    const shop = await state.env('ORDERS_URL');
    if (!shop) {
      return { status: 'success', result: `Order ${args.orderId} is packed.` };
    }
    // The shop's API, through duet's fetch (its host is on agents/code.yaml's allowlist).
    const res = await fetch(`${shop}/orders/${encodeURIComponent(args.orderId)}`);
    if (!res.ok) {
      return { status: 'error', error: `The shop answered ${res.status} for ${args.orderId}.` };
    }
    const order = await res.json();
    return { status: 'success', result: `Order ${args.orderId} is ${order.status}.` };
  },
});
