import { defineTool } from '@standardagents/spec';

// A .js file is JavaScript: TypeScript's syntax is an error in it.
const label: string = 'typed';

export default defineTool({ description: label, result: 'ok' });
