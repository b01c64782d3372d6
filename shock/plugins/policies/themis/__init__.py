"""Themis (Mahajan et al., NSDI 2020): finish-time fair leases sold by partial-allocation auctions."""
