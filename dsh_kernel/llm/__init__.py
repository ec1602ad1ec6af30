"""The model seam: content blocks, messages, stream chunks, the assembler and the providers."""
