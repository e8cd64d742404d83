import { defineEffect } from '@standardagents/spec';
export default defineEffect({ description: 'The Rust effect `plain`.', handler: 'nope' });
