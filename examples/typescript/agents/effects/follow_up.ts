import { defineEffect } from '@standardagents/spec';
import { z } from 'zod';

export default defineEffect(
  'Asks the customer again about an order',
  z.object({ orderId: z.string() }),
  async (state, args) => {
    state.queueMessage({ role: 'user', content: `Any news on ${args.orderId}?` });
  },
);
