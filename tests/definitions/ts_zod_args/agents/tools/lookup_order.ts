import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Looks an order up.',
  args: z.object({
    orderId: z.string().describe('The order number, as printed on the receipt'),
    include: z.array(z.enum(['items', 'shipping', 'payments'])).optional(),
    limit: z.number().int().min(1).max(50).default(10),
  }),
  result: 'order {{orderId}}',
});
