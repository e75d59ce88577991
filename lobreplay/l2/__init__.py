"""Level-2 books: the .lobc record file (lobc), price ladders (ladder), the .lobc replay (replay)."""
