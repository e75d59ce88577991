"""What every replay shares: the sizing cache, output folders, many days at once."""
