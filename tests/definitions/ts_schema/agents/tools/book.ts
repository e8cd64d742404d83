import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

export default defineTool({
  description: 'Books a slot.',
  args: z.object({ at: z.date(), room: z.string() }),
  result: 'booked',
});
