"""Reading results documents and turning them into tables, figures and reports."""
