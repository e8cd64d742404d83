import { defineNotification } from '@standardagents/spec';
const channel = 'C0OPS';
export default defineNotification({ slack: { channel }, events: ['question.parkd'] });
