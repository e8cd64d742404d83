import { defineHandler } from '@standardagents/spec';

// A desk that answers without a model: each message opens a ticket, numbered per thread.
export default defineHandler({
  execute: async (state, message) => {
    const n = ((await state.getValue('tickets')) ?? 0) + 1;
    await state.setValue('tickets', n);
    await state.setStatus(`${n} ticket(s) open`);
    await state.injectMessage({
      role: 'assistant',
      content: `Ticket ${n} opened: "${message.content}". We answer within a day.`,
    });
  },
});
