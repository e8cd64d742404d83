import { defineTool } from '@standardagents/spec';
import { z } from 'zod';
import { GREETING } from '../lib/words.mjs';

export default defineTool({
  description: `${GREETING}: greets someone by name.`,
  args: z.object({ name: z.string().min(1) }),
  result: `${GREETING}, {{name}}!`,
});
