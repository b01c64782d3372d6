"""Themis (Mahajan et al., NSDI 2020): finish-time fair GPU leases sold by auctions."""
