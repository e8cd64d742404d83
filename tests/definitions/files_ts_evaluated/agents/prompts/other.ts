import { defineThing } from '@standardagents/spec';

export default defineThing({ name: 'other' });
