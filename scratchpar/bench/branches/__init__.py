"""The branches benchmark: a Towers step split over the ranks by branch, against one device."""
