import { defineTool } from '@standardagents/spec';

function check(): never {
  throw 'not an Error, a string';
}

export default defineTool({ description: check(), result: 'ok' });
