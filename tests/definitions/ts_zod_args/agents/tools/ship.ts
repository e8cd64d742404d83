import { defineTool } from '@standardagents/spec';
import { z } from 'zod';

const Address = z.object({
  street: z.string(),
  city: z.string(),
  country: z.string().length(2).describe('ISO 3166 alpha-2'),
});

export default defineTool({
  description: 'Ships a parcel.',
  args: z
    .object({
      to: Address,
      from: Address.optional(),
      speed: z.union([z.literal('standard'), z.literal('express'), z.number().int().positive()]),
      insured: z.boolean().default(false),
      note: z.string().max(200).nullable().optional(),
    })
    .describe('Where and how to ship'),
  result: 'shipped',
});
