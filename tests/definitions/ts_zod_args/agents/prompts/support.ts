import { definePrompt } from '@standardagents/spec';
import { z } from 'zod';

export default definePrompt({
  name: 'support',
  toolDescription: 'Answers a customer.',
  model: 'fast',
  prompt: 'You help customers with their orders.',
  tools: ['lookup_order', 'ship', 'refund'],
  requiredSchema: z.object({ customer: z.string(), priority: z.enum(['low', 'high']).default('low') }),
});
