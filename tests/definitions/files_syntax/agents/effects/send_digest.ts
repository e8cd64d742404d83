import { defineEffect } from '@standardagents/spec';
export default defineEffect({});
