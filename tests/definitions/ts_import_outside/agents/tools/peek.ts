import { defineTool } from '@standardagents/spec';
import { secret } from '../../../x';

export default defineTool({ description: `Peeks ${secret}.`, result: 'ok' });
