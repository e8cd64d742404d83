import { definePrompt } from '@standardagents/spec';
import { z } from 'zod';
import { TONE } from '../lib/support';

export default definePrompt({
  name: 'support',
  toolDescription: 'Answers a customer about their order',
  model: 'offline',
  prompt: `${TONE} Help the customer with their order: look it up, then say when it arrives.`,
  requiredSchema: z.object({
    customer: z.string().describe('The customer to help'),
  }),
  tools: ['lookup_order', 'estimate_delivery'],
  hooks: ['trim_history', 'audit'],
});
