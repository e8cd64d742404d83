import { defineTool } from '@standardagents/spec';
import { COMPANY } from '../../shared/constants';

const base = { result: 'order {{orderId}} found' };

export default defineTool({
  description: `Looks an order up in ${COMPANY}'s shop.`,
  args: {
    type: 'object',
    properties: { orderId: { type: 'string' } },
    required: ['orderId'],
  },
  ...base,
});
