"""`shock sweep`: run the product of option lists as cells in local worker processes."""
