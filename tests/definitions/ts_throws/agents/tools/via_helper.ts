import { defineTool } from '@standardagents/spec';
import { endpoint } from '../lib/config';

export default defineTool({
  description: 'Looks a parcel up.',
  http: { url: `${endpoint('us')}/parcels/{{id}}` },
});
