import { defineTool } from '@standardagents/spec';

const limit = 3;
if (limit < 5) {
  throw new Error('the refund limit must be at least 5');
}

export default defineTool({ description: 'Refunds.', result: 'ok' });
