import { defineTool } from '@standardagents/spec';
import { z } from 'zod';
import { CARRIERS } from '../lib/support';

export default defineTool({
  description: 'Estimates when an order arrives',
  args: z.object({
    orderId: z.string().describe('The order id'),
    carrier: z
      .string()
      .refine((c) => (CARRIERS as readonly string[]).includes(c), 'carrier must be ups, dhl or post'),
    days: z.coerce.number().int().min(1).default(3).describe('Days of handling'),
  }),
  result: 'Order {{orderId}} ships with {{carrier}} within {{days}} days.',
});
