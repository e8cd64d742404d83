import { defineTool } from '@standardagents/spec';

import { z } from 'zod';

export default defineTool({
  description: 'Looks an order up.',
  args: z.object({ orderId: z.string() }),
  result: 'order {{orderId}}',
});
