import { defineTool } from '@standardagents/spec';
import { z } from 'zod';
import _ from 'lodash';

export default defineTool({
  description: _.padStart('Pads.', 8),
  args: z.object({ text: z.string() }),
  result: 'ok',
});
